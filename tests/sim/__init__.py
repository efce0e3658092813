"""A simulated GPU cluster for end-to-end tests: fault plans and what each workload pod does under them."""
