"""REST API of scenario runs and of the route between two cards (``urls.router``)."""
