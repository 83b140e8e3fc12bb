// Package doclinks holds one test: every doc link in the module's Go
// documentation (a name, Type.Method or pkg.Name in square brackets)
// names something that exists, so that a renamed or removed identifier
// cannot leave a package manual pointing at nothing. It has no code of
// its own.
package doclinks
