// Package signature signs and verifies A202 objects, mandates and grade
// documents.
//
// This file set starts with the signature purpose table: which purposes may
// sign which object type, and how many signatures each type must carry.
package signature
