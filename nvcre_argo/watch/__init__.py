"""The watcher's logic: Argo Workflows in, a Certification's status (and the Events to emit) out.

- `status`: `view_workflows` reads what the Workflows carrying a Certification's label say, `compute_status`
  adds the result ConfigMaps' facts to make its `CertificationStatus` (the rules are tabled in its docstring),
  `status_changed` decides whether to write;
- `categories`: one category's status, from its Workflow or from what was seen last time;
- `diagnose`: a `testScale: diagnose` category's isolation summary in its status, and the faults it finds
  beyond failed nodes (a broken link between domains, untested nodes) failing the category;
- `workflows`: reads an Argo Workflow object (phase, node map or `compressedNodes`, the `record` outputs);
- `conditions`: condition types, reasons and the reference's exact messages;
- `events`: `events_for_transition`, the Events a status write deserves, and `compile_warning_events`, what
  `--submit` says about a Certification it compiled.

Why pure functions over plain dicts: every phase combination becomes a table test, and a restarted watcher
that recomputes from the same objects writes the same status. The loop that lists, watches and patches lives
elsewhere and stays thin.
"""
