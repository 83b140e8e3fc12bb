package cli

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/partyd/party/internal/instance"
)

func init() {
	register("init", "create an instance's state directory: keys, certificate, tokens, peer file", runInit)
}

const initUsage = `Usage: party init --dir DIR --org ORG_ID [--name NAME] [--agent AGT_ID] [--principal PRN_ID]
                  [--role ROLE] [--mcp-addr ADDR] [--peer-addr ADDR] [--admin-addr ADDR]
                  [--public-url URL] [--host HOST]... [--container] [--json]

Creates a state directory for one organisation: the principal's and the
agent's signing keys, a self-signed TLS certificate, the agent token (MCP)
and the admin token (approvals page), the record database with an
instance mandate and both key records, and peer.json, the file to hand to
your counterparty. DIR must not exist or must be empty: init never
overwrites keys. --name gives the organisation's name for people (one
line, at most 128 characters): it goes into peer.json, and a
counterparty's approvals page shows it beside ORG_ID.

The MCP and admin listeners must be loopback addresses unless --container
is given (inside a container whose ports the host publishes on loopback).
The peer listener is what counterparties reach; --public-url is how they
reach it (default https://PEER_ADDR), and --host adds names or addresses
to the TLS certificate.

Output: what was created and the next steps; with --json the summary
{"organization_id", "principal_id", "agent_id", "principal_key_id",
"agent_key_id", "peer_file", "mcp_url", "peer_url", "agent_card_url",
"admin_url"}.

Exit status: 0 when created, 1 when refused (DIR not empty, an identifier
or address that is not valid), 2 on a usage error.
`

func runInit(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party init", initUsage)
	dir := c.dirFlag()
	var o instance.InitOptions
	c.StringVar(&o.OrganizationID, "org", "", "this organisation's A202 identifier, org_... (required)")
	c.StringVar(&o.Name, "name", "", "the organisation's name for people, in peer.json (optional)")
	c.StringVar(&o.AgentID, "agent", "", "the agent's identifier (default agt_<org suffix>_agent)")
	c.StringVar(&o.PrincipalID, "principal", "", "the principal's identifier (default prn_<org suffix>_principal)")
	c.StringVar(&o.Role, "role", "", "the principal's role, matched against approval rules (default procurement_lead)")
	c.StringVar(&o.MCPAddr, "mcp-addr", "", "the agent's MCP listener, loopback (default 127.0.0.1:7401)")
	c.StringVar(&o.PeerAddr, "peer-addr", "", "the HTTPS listener counterparties reach (default 127.0.0.1:7402)")
	c.StringVar(&o.AdminAddr, "admin-addr", "", "the principal's approvals page, loopback (default 127.0.0.1:7403)")
	c.StringVar(&o.PublicURL, "public-url", "", "the peer listener as counterparties reach it (default https://PEER_ADDR)")
	var hosts stringList
	c.Var(&hosts, "host", "a DNS name or IP address for the TLS certificate (repeatable)")
	c.BoolVar(&o.Container, "container", false, "allow non-loopback MCP and admin addresses (inside a container)")
	asJSON := c.Bool("json", false, "print the summary as JSON")
	if code, done := c.parseNoArgs(args, dir, stdout, stderr); done {
		return code
	}
	if o.OrganizationID == "" {
		return c.usageError(stderr, "--org is required")
	}
	o.Hosts = hosts
	sum, err := instance.Init(*dir, o)
	if err != nil {
		if errors.Is(err, instance.ErrExists) {
			err = fmt.Errorf("%s already holds files; init never overwrites a state directory (choose a new or empty directory)", *dir)
		}
		return failure(c.Name(), err, *asJSON, stdout, stderr)
	}
	if *asJSON {
		writeJSONLine(stdout, sum)
		return 0
	}
	fmt.Fprintf(stdout, "Created the party instance of %s in %s\n\n", sum.OrganizationID, *dir)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  principal\t%s, key %s (%s)\n", sum.PrincipalID, sum.PrincipalKeyID, instance.PrincipalKeyFile)
	fmt.Fprintf(tw, "  agent\t%s, key %s (%s)\n", sum.AgentID, sum.AgentKeyID, instance.AgentKeyFile)
	fmt.Fprintf(tw, "  TLS certificate\t%s\n", instance.TLSCertFile)
	fmt.Fprintf(tw, "  record\t%s (instance mandate and both key records)\n", instance.DatabaseFile)
	fmt.Fprintf(tw, "  agent token\t%s (opens the MCP endpoint only)\n", instance.AgentTokenFile)
	fmt.Fprintf(tw, "  admin token\t%s (opens the approvals page only)\n", instance.AdminTokenFile)
	fmt.Fprintf(tw, "  peer file\t%s\n", sum.PeerFile)
	fmt.Fprintf(tw, "  MCP endpoint\t%s\n", sum.MCPURL)
	fmt.Fprintf(tw, "  peer endpoint\t%s (AgentCard %s)\n", sum.PeerURL, sum.AgentCardURL)
	fmt.Fprintf(tw, "  approvals page\t%s\n", sum.AdminURL)
	tw.Flush()
	fmt.Fprintf(stdout, `
Next steps:
  1. Hand %[2]s to your counterparty, out of band, and pin theirs:
       party peer add --dir %[1]s THEIR_PEER_FILE.json
  2. Issue your agent a mandate (see 'party mandate issue -h'):
       party mandate issue --dir %[1]s --file REQUEST.json
  3. Start the instance:
       party serve --dir %[1]s
  4. Point your agent's MCP client at %[3]s with the token in %[1]s/%[4]s,
     or have it launch: party mcp --dir %[1]s
`, *dir, sum.PeerFile, sum.MCPURL, instance.AgentTokenFile)
	return 0
}
