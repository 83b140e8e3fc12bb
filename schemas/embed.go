// Package schemas carries party's own JSON Schemas (draft 2020-12) for A202
// objects, embedded into the binary so that validation never depends on
// files or network at run time.
//
// The schemas are written for this project from the A202 v0.1 prose; they
// are not the published schema files. Each file covers one object family
// and addresses the others by $id under BaseURI. internal/schema compiles
// them; nothing else should read FS directly.
package schemas

import "embed"

// FS holds every *.schema.json file of this directory and of profiles/.
// Paths are relative, for example "envelope.schema.json" or
// "profiles/freight-spot-0.1.schema.json"; a file's $id is BaseURI plus
// that path, which is what lets relative $refs between files resolve.
//
//go:embed *.schema.json profiles/*.schema.json
var FS embed.FS

// BaseURI is the prefix of every $id in FS. The .invalid top-level domain
// (RFC 2606) guarantees the identifiers can never be fetched, so a missing
// resource is a compile error instead of a network request.
const BaseURI = "https://party.invalid/schemas/"
