package messaging

// Detach is detach, for the external tests.
var Detach = detach
