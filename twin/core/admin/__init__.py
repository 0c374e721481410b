"""What every app's admin shares: ``TwinModelAdmin`` and its form (``base``), coloured
choice badges (``badges``), list filters built from the API's filtersets
(``filters``) and a paginator that never counts a million-row table (``pagination``).
"""
