"""Team rules: house rules one member proved, shared through the team's own git, re-proved on each member's work.

| module | job |
|---|---|
| ``store`` | one rule file (``<rules dir>/<rule id>/<member id>.toml``): model, strict parsing, writing, screen |
| ``local`` | what one member keeps locally: their member id, and the night's verdict on each team rule |
| ``git`` | the ``git`` CLI in a subprocess: branches, commits built beside the work tree, push, clone, pull |
| ``location`` | where a project's team rules live (its own repository or a rules repository); ``init_team`` |
| ``publish`` | which adopted rules are shared, the files and the commit that share them |
| ``status`` | what is shared, what waits or was rejected locally, which rules hurt more members than they help |
| ``peer`` | ``team pull --from-peer``: a SkillOpt-Sleep rules manifest read strictly, its rules made team rule files |

One file per rule *and member*: a member only ever writes their own files, so two members publishing the same rule
(same content-addressed id) write two files in one folder and their branches merge without conflict by construction.
A file never holds a transcript, a request, a path outside the repository or a secret (``store.screen_rule``).
"""
