"""The regression maths, pure: no Django, no database, no settings (an import-linter contract).
The app's Django modules read the series from the database and call these.

- edivisive: change points of a series (E-Divisive means, a t-test for significance)
- tstats: Student's t distribution and the two-sample t-test
- judging: one run's figure against its history (verdicts), the confirmation rule, robust noise
- sensitivity: the bound a change must reach to count, from a series' noise
- sequential: when a comparison that adds engine starts may stop (Pocock's level)
- bisect_search: the commit a bisection runs next
"""
