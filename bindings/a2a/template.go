package a2a

import "encoding/json"

// The exact bytes this binding writes, read without a JSON decoder.
//
// encoding/json reads a message/send request or its answer byte by byte
// through its scanner, base64 of every object included, with reflection
// to fill the wire structs: about a fiftieth of a formation's CPU, both
// ends. A message this binding wrote (appendMessage, encodeSend,
// encodeResult) has one layout: compact, members in one order, strings
// without escapes. matchSend and matchReply read exactly that layout and
// nothing else: any other byte where the layout puts one (another order,
// whitespace, an escape, a byte outside ASCII, a member more or less)
// makes them decline, and the caller reads the bytes with decodeStrict,
// as before. What they accept, decodeStrict reads to the same values
// (FuzzTemplate holds them to it).

// cursor walks bytes in the layout; ok turns false at the first byte that
// is not where the layout puts it, and stays false.
type cursor struct {
	b  []byte
	i  int
	ok bool
}

// lit consumes s.
func (c *cursor) lit(s string) {
	if !c.ok || len(c.b)-c.i < len(s) || string(c.b[c.i:c.i+len(s)]) != s {
		c.ok = false
		return
	}
	c.i += len(s)
}

// peek reports whether the next byte is x.
func (c *cursor) peek(x byte) bool { return c.ok && c.i < len(c.b) && c.b[c.i] == x }

// str consumes a JSON string of printable ASCII without escapes.
func (c *cursor) str() string {
	if !c.peek('"') {
		c.ok = false
		return ""
	}
	for j := c.i + 1; j < len(c.b); j++ {
		switch x := c.b[j]; {
		case x == '"':
			s := string(c.b[c.i+1 : j])
			c.i = j + 1
			return s
		case x < 0x20 || x == '\\' || x >= 0x80:
			c.ok = false
			return ""
		}
	}
	c.ok = false
	return ""
}

// raw consumes a JSON-RPC id as the layout writes one: a string as str
// reads it, a non-negative integer without leading zeros, or null. It
// returns the id's bytes.
func (c *cursor) raw() json.RawMessage {
	start := c.i
	switch {
	case c.peek('"'):
		c.str()
	case c.peek('n'):
		c.lit("null")
	case c.ok && c.i < len(c.b) && '0' <= c.b[c.i] && c.b[c.i] <= '9':
		j := c.i + 1
		if c.b[c.i] != '0' {
			for j < len(c.b) && '0' <= c.b[j] && c.b[j] <= '9' {
				j++
			}
		}
		c.i = j
	default:
		c.ok = false
	}
	if !c.ok {
		return nil
	}
	return json.RawMessage(c.b[start:c.i])
}

// end consumes trailing white space, and requires the end of the bytes.
func (c *cursor) end() {
	for c.ok && c.i < len(c.b) && (c.b[c.i] == ' ' || c.b[c.i] == '\n' || c.b[c.i] == '\r' || c.b[c.i] == '\t') {
		c.i++
	}
	c.ok = c.ok && c.i == len(c.b)
}

// message reads appendMessage's layout.
func (c *cursor) message() *wireMessage {
	m := &wireMessage{}
	c.lit(`{"kind":`)
	m.Kind = c.str()
	c.lit(`,"messageId":`)
	m.MessageID = c.str()
	c.lit(`,"extensions":[`)
	m.Extensions = []string{c.str()}
	c.lit(`],"metadata":{`)
	key := c.str()
	c.lit(`:`)
	start := c.i
	c.lit(`{"transaction_id":`)
	if c.peek('n') {
		c.lit("null")
	} else {
		c.str()
	}
	c.lit(`}`)
	if c.ok {
		m.Metadata = map[string]json.RawMessage{key: json.RawMessage(c.b[start:c.i])}
	}
	c.lit(`},"parts":[`)
	m.Parts = []wirePart{}
	for c.ok && !c.peek(']') {
		if len(m.Parts) > 0 {
			c.lit(`,`)
		}
		p := wirePart{File: &wireFile{}}
		c.lit(`{"kind":`)
		p.Kind = c.str()
		c.lit(`,"file":{"mimeType":`)
		p.File.MimeType = c.str()
		c.lit(`,"bytes":`)
		p.File.Bytes = c.str()
		c.lit(`}}`)
		m.Parts = append(m.Parts, p)
	}
	c.lit(`],"role":`)
	m.Role = c.str()
	c.lit(`}`)
	return m
}

// matchSend reads a message/send request in encodeSend's layout; false
// when the bytes are not in it.
func matchSend(body []byte) (wireRequest, bool) {
	var req wireRequest
	c := &cursor{b: body, ok: true}
	c.lit(`{"jsonrpc":`)
	req.JSONRPC = c.str()
	c.lit(`,"method":`)
	req.Method = c.str()
	c.lit(`,"params":{"message":`)
	m := c.message()
	c.lit(`},"id":`)
	req.ID = c.raw()
	c.lit(`}`)
	c.end()
	if !c.ok {
		return wireRequest{}, false
	}
	req.Params.Message = *m
	return req, true
}

// matchReply reads a message/send answer in encodeResult's layout; false
// when the bytes are not in it.
func matchReply(body []byte) (wireReply, bool) {
	var r wireReply
	c := &cursor{b: body, ok: true}
	c.lit(`{"jsonrpc":`)
	r.JSONRPC = c.str()
	c.lit(`,"id":`)
	r.ID = c.raw()
	c.lit(`,"result":`)
	r.Result = c.message()
	c.lit(`}`)
	c.end()
	if !c.ok {
		return wireReply{}, false
	}
	return r, true
}
