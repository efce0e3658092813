"""Resolution: from a Certification and the catalog to exactly what each category will run (pure)."""
