package verify

import (
	"fmt"
	"strings"
)

// verdict gathers the parts of a compound check (a guard, an actor's
// authority) and settles them into one outcome: failed if any part
// failed, else not_checkable if any part could not be established, else
// verified. A compound check is never verified on the strength of a part
// nobody could check.
type verdict struct {
	failed, unknown, passed []string
}

func (v *verdict) fail(format string, args ...any) {
	v.failed = append(v.failed, fmt.Sprintf(format, args...))
}

func (v *verdict) unsure(format string, args ...any) {
	v.unknown = append(v.unknown, fmt.Sprintf(format, args...))
}

func (v *verdict) pass(format string, args ...any) {
	v.passed = append(v.passed, fmt.Sprintf(format, args...))
}

// take folds an outcome of another check into the verdict.
func (v *verdict) take(res Result, detail string) {
	switch res {
	case Verified:
		v.pass("%s", detail)
	case Failed:
		v.fail("%s", detail)
	default:
		v.unsure("%s", detail)
	}
}

func (v *verdict) result() (Result, string) {
	switch {
	case len(v.failed) > 0:
		d := strings.Join(v.failed, "; ")
		if len(v.unknown) > 0 {
			d += "; also not established: " + strings.Join(v.unknown, "; ")
		}
		return Failed, d
	case len(v.unknown) > 0:
		return NotCheckable, "not established: " + strings.Join(v.unknown, "; ")
	}
	return Verified, strings.Join(v.passed, "; ")
}
