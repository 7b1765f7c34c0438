"""Signals other apps listen to (commit statuses, alerts) without the run life cycle knowing them."""
from django.dispatch import Signal

# Sent once a run is final (succeeded or failed), after its transaction commits. Arguments: run_id.
run_finished = Signal()
