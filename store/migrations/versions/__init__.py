"""One file per schema revision, oldest first: 0001 is the schema of fe781af (and fills in what releases before it
lacked)."""
