"""Confirmed regressions as forge issues: one per change point and watch, opened, updated when
the change is bisected, closed with the reason when it is triaged or the level comes back."""
