"""Official upstream implementations: `--impl official` runs, `dlperf sources`, `dlperf parse`.

The package owns everything about an upstream's own training script; its modules import one
way, each only from those before it:

* `manifest`: the manifest models (`third_party_scripts/<name>.toml`) and their validation,
  the command-template placeholders included; loading, selecting and finding manifests.
* `checkout`: fetching, patching and verifying an upstream's pinned checkout (the source cache).
* `commands`: each node's command line for a spec, filled in from the manifest's templates
  (`dlperf.launch` starts them; it imports nothing from this package).
* `adapter`: `OfficialAdapter`, a manifest at a verified checkout driven like any adapter.

Nothing is re-exported here: import from the module that owns a name.
"""
