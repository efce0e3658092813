"""End-to-end tests: compiled Certifications run by Argo's real controller on the simulated GPU cluster."""
