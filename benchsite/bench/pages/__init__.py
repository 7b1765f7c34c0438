"""The web pages: views.py and urls.py, one module per page (home, history, waterfall, compare,
runpage), the reads behind them (selectors.py), forms, and the charts' rolled-up series. Only URL
modules import these (an import-linter contract); what other apps share lives in bench/domain/."""
