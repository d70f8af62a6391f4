"""What the wheel carries (the rest of the metadata is pyproject.toml's).

The apps are top-level folders and stay so; templates/ and static/ (the plotly and asciinema
bundles included) are mapped into the installed `benchviewer` package, where
`benchviewer.settings.bundled` finds them: an installed Benchviewer needs nothing of the clone.
"""

from setuptools import find_packages, setup

BUNDLED = {"benchviewer.templates": "templates", "benchviewer.static": "static"}

setup(
    packages=[*find_packages(include=["benchviewer*", "core*", "trials*", "comparisons*", "shares*"]), *BUNDLED],
    package_dir=BUNDLED,
    package_data={**{name: ["**/*"] for name in BUNDLED}, "core": ["sqlite_schema.sql"]},  # a new database's schema
)
