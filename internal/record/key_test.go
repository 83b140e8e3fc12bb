package record_test

import (
	"crypto/ecdsa"

	"github.com/partyd/party/internal/keys"
)

func testKey() (*ecdsa.PrivateKey, error) { return keys.Generate() }
