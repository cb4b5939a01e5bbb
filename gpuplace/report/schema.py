"""The version of gpuplace's JSON documents (`--json` of every command, and the error document
`--json` gets on a failure). It rises when a field is removed or changes meaning; adding a field
keeps it."""

SCHEMA_VERSION = 1
