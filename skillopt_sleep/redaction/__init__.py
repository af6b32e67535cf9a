"""Secret redaction of every text a harvest stores.

| module | job |
|---|---|
| ``redact`` | four layers (detectors, patterns, token shapes, command-line passwords) in one pass of replacements |
| ``credential_args`` | where a command line carries a password (``sshpass -p VALUE``, ``mysql -pVALUE``, ...) |
"""
