"""The command line: click only. One module per command group (`jobs`, `local`, `envs`, `init`),
`main` the root and the one place errors become `error:` / `hint:` lines and exit codes;
`context` the shared options and gcloud's configuration under them; `formats` and `output` what
is printed.

May import: every layer. Nothing imports this folder. The only folder that imports
click; heavy imports wait inside the commands, so `aiptrain --help` stays fast.
"""
