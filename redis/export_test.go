package redis

// Names of the fleet move's scripts and keys, for the external tests.
var MoveScripts = map[string]string{markScript: "mark", restoreScript: "restore", finishScript: "finish", settleScript: "settle"}
