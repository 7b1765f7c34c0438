"""Signals other apps listen to (commit statuses, alerts) without the run life cycle knowing them."""
from django.dispatch import Signal

# Sent once a run is final (succeeded or failed), after its transaction commits. Arguments: run_id.
run_finished = Signal()

# Sent when a run's outcome or its finality changed (a new run is pending, a cancelled one failed),
# and once when a finished run has been judged, after the transaction commits. Arguments: run_id.
outcome_changed = Signal()

# Sent when a worker claimed a run (it starts building), after the transaction commits. Arguments: run_id.
run_started = Signal()
