package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate/auth"
)

const tokenUsage = `usage: lakegate token <command> [flags]   (as Pulsar's "pulsar tokens")

  create-secret-key [--output FILE] [--base64]
        a random HS256 key (32 bytes); to stdout without --output
  create-key-pair [--algorithm RS256|ES256|…] --output-private-key FILE --output-public-key FILE
        a key pair (DER: private PKCS#8, public X.509)
  create (--secret-key KEY | --private-key KEY) --subject ROLE [--expiry-time 1h|7d|1y] [--claim sub] [--audience A]
        a token; KEY is file:///path or data:;base64,...
  show TOKEN
        the token's header and claims, unverified
  validate (--secret-key KEY | --public-key KEY) TOKEN
        verify a token and print its role
`

// runToken implements `lakegate token`.
func runToken(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(tokenUsage)
	}
	fs := flag.NewFlagSet("token "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := tokenFlags{
		output:      fs.String("output", "", "file to write the key to (default stdout)"),
		b64:         fs.Bool("base64", false, "write the secret key in base64"),
		alg:         fs.String("algorithm", "RS256", "key pair algorithm"),
		outPriv:     fs.String("output-private-key", "", "file for the private key"),
		outPub:      fs.String("output-public-key", "", "file for the public key"),
		secretKey:   fs.String("secret-key", "", "HS256 key: file:///path or data:;base64,..."),
		privateKey:  fs.String("private-key", "", "private key: file:///path or data:;base64,..."),
		publicKey:   fs.String("public-key", "", "public key: file:///path or data:;base64,..."),
		subject:     fs.String("subject", "", "the role"),
		expiry:      fs.String("expiry-time", "", "token lifetime: 30s, 10m, 12h, 7d, 2w, 1y"),
		claim:       fs.String("claim", "sub", "claim holding the role"),
		audience:    fs.String("audience", "", "aud claim"),
		headerPairs: fs.String("headers", "", "extra JWT headers, k1=v1,k2=v2"),
	}
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%v\n%s", err, tokenUsage)
	}
	switch args[0] {
	case "create-secret-key":
		k, err := auth.NewSecretKey()
		if err != nil {
			return err
		}
		if *f.b64 {
			k = []byte(base64.StdEncoding.EncodeToString(k))
		}
		return writeKey(*f.output, k, stdout)
	case "create-key-pair":
		if *f.outPriv == "" || *f.outPub == "" {
			return fmt.Errorf("create-key-pair needs --output-private-key and --output-public-key\n%s", tokenUsage)
		}
		priv, pub, err := auth.NewKeyPair(*f.alg)
		if err != nil {
			return err
		}
		if err := writeKey(*f.outPriv, priv, stdout); err != nil {
			return err
		}
		return writeKey(*f.outPub, pub, stdout)
	case "create":
		return tokenCreate(f, stdout)
	case "show":
		if fs.NArg() != 1 {
			return fmt.Errorf("show needs one token\n%s", tokenUsage)
		}
		return tokenShow(fs.Arg(0), stdout)
	case "validate":
		if fs.NArg() != 1 {
			return fmt.Errorf("validate needs one token\n%s", tokenUsage)
		}
		return tokenValidate(f, fs.Arg(0), stdout)
	}
	return fmt.Errorf("unknown token command %q\n%s", args[0], tokenUsage)
}

// tokenFlags are the flags of the token commands (each uses some).
type tokenFlags struct {
	output, alg, outPriv, outPub                  *string
	secretKey, privateKey, publicKey              *string
	subject, expiry, claim, audience, headerPairs *string
	b64                                           *bool
}

// tokenCreate mints a token signed with --secret-key or --private-key.
func tokenCreate(f tokenFlags, stdout io.Writer) error {
	spec := auth.TokenSpec{Subject: *f.subject, Claim: *f.claim, Audience: *f.audience}
	if *f.expiry != "" {
		d, err := parseExpiry(*f.expiry)
		if err != nil {
			return err
		}
		spec.Expiry = d
	}
	if *f.headerPairs != "" {
		spec.Headers = map[string]string{}
		for _, kv := range strings.Split(*f.headerPairs, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("--headers: %q is not k=v", kv)
			}
			spec.Headers[k] = v
		}
	}
	var tok string
	switch {
	case *f.secretKey != "" && *f.privateKey == "":
		k, err := auth.ReadKeyData(*f.secretKey)
		if err != nil {
			return err
		}
		if tok, err = auth.NewToken(spec, k, nil, ""); err != nil {
			return err
		}
	case *f.privateKey != "" && *f.secretKey == "":
		b, err := auth.ReadKeyData(*f.privateKey)
		if err != nil {
			return err
		}
		k, err := auth.ParsePrivateKey(b)
		if err != nil {
			return err
		}
		if tok, err = auth.NewToken(spec, nil, k, ""); err != nil {
			return err
		}
	default:
		return fmt.Errorf("create needs one of --secret-key and --private-key\n%s", tokenUsage)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// tokenShow prints a JWT's header and claims (no verification).
func tokenShow(token string, stdout io.Writer) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("show: not a JWT (three dot-separated parts)")
	}
	for _, p := range parts[:2] {
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil || !json.Valid(b) {
			return errors.New("show: not a JWT (a part is not base64url JSON)")
		}
		fmt.Fprintln(stdout, string(b))
	}
	return nil
}

// tokenValidate checks a token as the node would, with --secret-key or
// --public-key, and prints its role.
func tokenValidate(f tokenFlags, token string, stdout io.Writer) error {
	tc := auth.TokenConfig{RoleClaim: *f.claim, Audience: *f.audience}
	switch {
	case *f.secretKey != "":
		k, err := auth.ReadKeyData(*f.secretKey)
		if err != nil {
			return err
		}
		tc.SecretKey = k
	case *f.publicKey != "":
		b, err := auth.ReadKeyData(*f.publicKey)
		if err != nil {
			return err
		}
		var perr error
		if tc.PublicKey, perr = auth.ParsePublicKey(b); perr != nil {
			return perr
		}
	default:
		return fmt.Errorf("validate needs --secret-key or --public-key\n%s", tokenUsage)
	}
	a, err := auth.New(auth.Config{Providers: []string{auth.MethodToken}, Token: tc})
	if err != nil {
		return err
	}
	id, err := a.Authenticate(auth.MethodToken, []byte(token), nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "valid: role %q", id.Role)
	if !id.Expires.IsZero() {
		fmt.Fprintf(stdout, ", expires %s", id.Expires.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(stdout)
	return nil
}

// writeKey writes a key to path (mode 0600), or to stdout without one.
func writeKey(path string, b []byte, stdout io.Writer) error {
	if path == "" {
		_, err := stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// parseExpiry parses Pulsar's expiry times: a number and s, m, h, d, w or y.
func parseExpiry(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("--expiry-time %q: want a number and a unit (s, m, h, d, w, y)", s)
	}
	n, err := strconv.Atoi(s[:len(s)-1])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--expiry-time %q: want a positive number and a unit (s, m, h, d, w, y)", s)
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour,
		'w': 7 * 24 * time.Hour, 'y': 365 * 24 * time.Hour}[s[len(s)-1]]
	if unit == 0 {
		return 0, fmt.Errorf("--expiry-time %q: unknown unit (want s, m, h, d, w, y)", s)
	}
	return time.Duration(n) * unit, nil
}
