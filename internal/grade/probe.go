package grade

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"

	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/verify"
)

// ProbePath is the peer route a counterparty presents published cases at
// (see the package documentation).
const ProbePath = "/a202/conformance/probe"

// maxCase bounds a presented case; the largest published fixture is a few
// kilobytes.
const maxCase = 1 << 20

// Authenticator names the pinned peer a request comes from
// (peering.Directory).
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (instance.PeerInfo, error)
}

// Judge is the judgment the probe gives: the gate on the exact bytes, a
// bundle judged as one record by the verifier, clock-free (`party gate`'s
// reading).
func Judge(body []byte) gate.Judgment {
	return gate.File(body, gate.Options{JudgeSet: verify.JudgeSet})
}

// ProbeHandler serves ProbePath: a pinned peer POSTs one case and is
// answered with this instance's judgment of it, and nothing else.
func ProbeHandler(peers Authenticator, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		peer, err := peers.AuthenticateRequest(r)
		if err != nil {
			http.Error(w, "a pinned client certificate is required", http.StatusForbidden)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxCase+1))
		if err != nil || len(body) > maxCase {
			http.Error(w, "a case is one JSON document of at most 1 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		j := Judge(body)
		codes := j.Codes
		if codes == nil {
			codes = []reason.Code{}
		}
		log.Debug("conformance case judged for a peer", "peer", peer.OrganizationID, "kind", j.Kind, "outcome", j.Outcome)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(Verdict{Kind: j.Kind, Outcome: j.Outcome, ReasonCodes: codes})
	})
}
