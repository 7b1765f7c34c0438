"""Signals other apps listen to (forge issues) without the regressions app knowing them."""
from django.dispatch import Signal

# Sent, inside the transaction that wrote it, when a change point was confirmed, marked (triaged),
# its range's bisection concluded, or an improvement was detected in its series. Arguments:
# change_point (the ChangePoint as saved).
change_point_changed = Signal()
