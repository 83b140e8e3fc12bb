package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
)

func init() {
	register("agent", "add, list or revoke this instance's agents (the principal's acts)", runAgent)
	register("key", "rotate or revoke an agent's key or the principal's (the principal's acts)", runKey)
}

const agentUsage = `Usage: party agent <add|list|revoke> --dir DIR [flags]

The principal's acts on the instance's agents, signed with the principal's
key in the state directory.

  add [--id agt_...]          add an agent: its own agent id, key and key
                              record signed by the principal, an instance
                              mandate for its key records, and its own MCP
                              bearer token (tokens/agents/<agent>); then
                              issue it mandates with 'party mandate issue'
                              (subject {"agent_id": ...}, and
                              parent_mandate_id for a delegated one)
  list                        the agents, their keys and token files
  revoke AGENT_ID [--reason]  revoke an added agent: its key, the agent
                              (revocation records), its mandates and its
                              token

A running 'party serve' signs with a new agent's key at once; it serves
the new agent's MCP token from its next start.

Exit status: 0 on success, 1 when the act fails, 2 on a usage error.
`

func runAgent(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	known := func(sub string) bool { return sub == "add" || sub == "list" || sub == "revoke" }
	if code, done := pickSubcommand("party agent", agentUsage, args, known, stdout, stderr); done {
		return code
	}
	sub := args[0]
	c := newFlags("party agent "+sub, agentUsage)
	dir := c.dirFlag()
	id := c.String("id", "", "the new agent's identifier (add; default a fresh agt_ id)")
	why := c.String("reason", "", "why (revoke)")
	asJSON := c.Bool("json", false, "print JSON")
	pos, code, done := c.parseDir(args[1:], dir, stdout, stderr)
	if done {
		return code
	}
	if (sub == "revoke") != (len(pos) == 1) || len(pos) > 1 {
		return c.usageError(stderr, "revoke takes one AGENT_ID; add and list take none")
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(o *org.Org, p *principal.Surface) int {
		ctx := context.Background()
		switch sub {
		case "add":
			a, err := p.AddAgent(ctx, *id)
			if err != nil {
				return failure(c.Name(), err, *asJSON, stdout, stderr)
			}
			if *asJSON {
				writeJSONLine(stdout, a)
				return 0
			}
			fmt.Fprintf(stdout, "added agent %s, key %s\n", a.AgentID, a.KeyID)
			fmt.Fprintf(stdout, "  key file        %s\n  MCP token file  %s\n  instance mandate %s\n", a.KeyFile, a.TokenFile, a.InstanceMandateID)
		case "revoke":
			if err := p.RevokeAgent(ctx, pos[0], *why); err != nil {
				return failure(c.Name(), err, *asJSON, stdout, stderr)
			}
			if *asJSON {
				writeJSONLine(stdout, map[string]string{"agent_id": pos[0], "status": "revoked"})
				return 0
			}
			fmt.Fprintf(stdout, "revoked agent %s\n", pos[0])
		case "list":
			cfg := o.Config()
			type row struct {
				AgentID   string `json:"agent_id"`
				KeyID     string `json:"key_id"`
				TokenFile string `json:"token_file"`
				Primary   bool   `json:"primary,omitempty"`
				Revoked   bool   `json:"revoked,omitempty"`
			}
			rows := []row{{AgentID: cfg.AgentID, KeyID: cfg.AgentKeyID, TokenFile: cfg.AgentTokenPath(cfg.AgentID), Primary: true}}
			for _, a := range cfg.Agents {
				rows = append(rows, row{AgentID: a.AgentID, KeyID: a.KeyID, TokenFile: cfg.AgentTokenPath(a.AgentID), Revoked: a.Revoked})
			}
			if *asJSON {
				writeJSONLine(stdout, rows)
				return 0
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT\tKEY\tTOKEN FILE\t")
			for _, r := range rows {
				note := ""
				if r.Primary {
					note = "primary"
				}
				if r.Revoked {
					note = "revoked"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.AgentID, r.KeyID, r.TokenFile, note)
			}
			tw.Flush()
		}
		return 0
	})
}

const keyUsage = `Usage: party key <rotate|revoke> --dir DIR [flags]

  rotate --agent AGENT_ID [--revoke] [--reason TEXT]
      give the agent a new key: a new key id and key record, and a later
      version of the old key's record, expired from now (with --revoke:
      revoked, and a signed revocation record). Every mandate issued to
      the agent under the old key is issued again to the new key and the
      old one revoked. What the old key signed before keeps verifying.
  rotate --principal [--reason TEXT]
      give the principal a new key: its key record is signed by the new
      key and by the current one, which vouches for it; config.json then
      names the new key (keys/principal-KEY_ID.pem), the old key's record
      gets a later version expired from now, peer.json pins both keys,
      every mandate the old key issued is issued again under the new one,
      and the old key file is deleted. Counterparties pin the new key on
      the old one's word. A compromised principal key cannot be rotated
      so (--revoke is refused): hand each counterparty a new peer file.
  revoke KEY_ID [--reason TEXT]
      revoke one of this organisation's keys with no successor.

Counterparties learn of the change from this instance's key records,
which they fetch again at most 30 seconds after their last fetch and at
once on a key they do not hold.

Exit status: 0 on success, 1 when the act fails, 2 on a usage error.
`

func runKey(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	known := func(sub string) bool { return sub == "rotate" || sub == "revoke" }
	if code, done := pickSubcommand("party key", keyUsage, args, known, stdout, stderr); done {
		return code
	}
	sub := args[0]
	c := newFlags("party key "+sub, keyUsage)
	dir := c.dirFlag()
	agentID := c.String("agent", "", "the agent whose key to rotate")
	ofPrincipal := c.Bool("principal", false, "rotate the principal's own key (rotate)")
	revoke := c.Bool("revoke", false, "revoke the old key rather than let it expire (rotate)")
	why := c.String("reason", "", "why, as plain text")
	asJSON := c.Bool("json", false, "print JSON")
	pos, code, done := c.parseDir(args[1:], dir, stdout, stderr)
	if done {
		return code
	}
	switch {
	case sub == "rotate" && ((*agentID == "") == !*ofPrincipal || len(pos) > 0):
		return c.usageError(stderr, "rotate takes one of --agent AGENT_ID or --principal, and no argument")
	case sub == "revoke" && len(pos) != 1:
		return c.usageError(stderr, "revoke takes one KEY_ID")
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(_ *org.Org, p *principal.Surface) int {
		ctx := context.Background()
		if sub == "revoke" {
			retired, rev, err := p.RevokeKey(ctx, pos[0], *why)
			if err != nil {
				return failure(c.Name(), err, *asJSON, stdout, stderr)
			}
			if *asJSON {
				writeJSONLine(stdout, map[string]string{"key_id": pos[0], "retired_key_record_id": retired, "revocation_record_id": rev})
				return 0
			}
			fmt.Fprintf(stdout, "revoked key %s (key record version %s, revocation record %s)\n", pos[0], retired, rev)
			return 0
		}
		if *ofPrincipal {
			r, err := p.RotatePrincipalKey(ctx, *revoke, *why)
			if err != nil {
				return failure(c.Name(), err, *asJSON, stdout, stderr)
			}
			if *asJSON {
				writeJSONLine(stdout, r)
				return 0
			}
			fmt.Fprintf(stdout, "rotated the principal key: %s replaces %s (%s)\n", r.NewKeyID, r.OldKeyID, r.KeyFile)
			for _, old := range slices.Sorted(maps.Keys(r.Retired)) {
				fmt.Fprintf(stdout, "  key %s retired (key record version %s)\n", old, r.Retired[old])
			}
			for _, old := range slices.Sorted(maps.Keys(r.Mandates)) {
				fmt.Fprintf(stdout, "  mandate %s reissued as %s\n", old, r.Mandates[old])
			}
			fmt.Fprintln(stdout, "  peer.json now pins both keys; counterparties learn the new one from this instance's key records")
			return 0
		}
		r, err := p.RotateAgentKey(ctx, *agentID, *revoke, *why)
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		if *asJSON {
			writeJSONLine(stdout, r)
			return 0
		}
		fmt.Fprintf(stdout, "rotated %s: key %s replaces %s (old key record version %s)\n", r.AgentID, r.NewKeyID, r.OldKeyID, r.Retired)
		if r.RevocationID != "" {
			fmt.Fprintf(stdout, "  revocation record %s\n", r.RevocationID)
		}
		for old, succ := range r.Mandates {
			fmt.Fprintf(stdout, "  mandate %s reissued as %s\n", old, succ)
		}
		return 0
	})
}
