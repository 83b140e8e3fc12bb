package schema

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/partyd/party/schemas"
)

// Which profiles are registered, without compiling any schema.
//
// ProfileKnown is asked by callers that only want to know whether a
// terms object names a registered profile: a verifier listing the
// unregistered types of a record, say, which validates nothing. Compiling
// every embedded schema to answer that cost a verifier tens of
// milliseconds and a few megabytes for the rest of its run. The
// identifiers are the x-a202-profile annotations of the embedded profile
// files, read here with the checks compileSet makes of them (the
// identifier's shape, the file named after it, no identifier twice);
// compileSet registers exactly these, each compiled, and a file that did
// not compile would stop the process at its first validation
// (mustCompile), so both sets agree in any party that runs
// (TestRegisteredProfilesAreCompiled).

// registered is the set of profile identifiers, read once per process.
var registered = sync.OnceValue(func() map[string]bool {
	ids, err := profileIDs(schemas.FS)
	if err != nil {
		panic(fmt.Sprintf("internal/schema: embedded profile schemas are broken: %v", err))
	}
	return ids
})

// profileIDs reads the identifier each profiles/*.schema.json of fsys
// registers under.
func profileIDs(fsys fs.FS) (map[string]bool, error) {
	files, err := fs.Glob(fsys, "profiles/*.schema.json")
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(files))
	for _, name := range files {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		id, _ := doc[profileAnnotation].(string)
		if !profileIDPattern.MatchString(id) {
			return nil, fmt.Errorf("%s: %s %q is not a profile identifier", name, profileAnnotation, id)
		}
		parts := strings.Split(id, "/")
		if want := parts[1] + "-" + parts[2] + ".schema.json"; path.Base(name) != want {
			return nil, fmt.Errorf("%s: registered as %q, file should be named %s", name, id, want)
		}
		if ids[id] {
			return nil, fmt.Errorf("%s: profile %q registered twice", name, id)
		}
		ids[id] = true
	}
	return ids, nil
}
