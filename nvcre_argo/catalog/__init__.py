"""The catalog: what each `domain/variant` runs (package data), plus user directories that add or override."""
