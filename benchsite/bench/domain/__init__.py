"""What a benchmark's figures mean, below the pages and shared with regressions/, integrations/ and
the rest of bench: the main line, clean samples, units and formats, roles, a repository's canonical
name, and the home page's cached summaries with the writes that renew them."""
