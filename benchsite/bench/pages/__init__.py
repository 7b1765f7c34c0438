"""The web pages: views.py and urls.py, one module per page (home, history, waterfall, compare,
runpage), the reads behind them (selectors.py), forms, units and roles."""
