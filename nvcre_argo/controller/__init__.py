"""The watcher process (`nvcre-argo watch`): keeps every Certification's status true to its Workflows."""
