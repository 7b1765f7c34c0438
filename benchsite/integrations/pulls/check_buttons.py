"""The buttons of a finished check run (GitHub's check-run `actions`) and what each one asks."""
from __future__ import annotations

ADD_STARTS, ACCEPT = "add_starts", "accept"
# GitHub's limits: a label of 20 characters, a description of 40, an identifier of 20; 3 buttons.
BUTTONS = {
    ADD_STARTS: {"label": "Add starts", "description": "Measure both sides with more starts"},
    ACCEPT: {"label": "Accept", "description": "Mark the slowdown as intended"},
}
# More starts can move a judgement of the figures, not a wrong output or a run that failed.
MEASURED = ("passed", "improved", "inconclusive", "regressed")


def check_buttons(comparison) -> list[dict]:
    """The buttons the check run shows now: none until it is done."""
    if comparison.state != "done" or comparison.outcome not in MEASURED:
        return []
    shown = [ADD_STARTS]
    if comparison.outcome == "regressed" and not comparison.accepted_by:
        shown.append(ACCEPT)
    return [{**BUTTONS[identifier], "identifier": identifier} for identifier in shown]
