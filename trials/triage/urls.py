urlpatterns: list = []  # triage pages and API (issue 5)
