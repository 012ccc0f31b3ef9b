"""The torch-free core: requests, the run's knobs, KV slots, policies, the step loop, workloads — everything a
dry run imports."""
