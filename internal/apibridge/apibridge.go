// Package apibridge lets the command line hand the public job API's
// environment to a job. A job of package stream builds on a
// *stream.Environment, which wraps the runtime's *engine.Environment in a
// field nothing outside stream may touch; cmd, which creates the runtime's
// environment from the configuration, needs the wrapper, and package
// stream must not export a way to build one from runtime values (go doc
// would show the runtime). So stream registers its constructor here when
// it is initialised, and internal/ keeps it from users.
package apibridge

import "github.com/gflink/gflink/engine"

// Wrap returns env as a *stream.Environment. Package stream sets it in
// its init function, before anything can call it; it is never changed.
var Wrap func(env *engine.Environment) any
