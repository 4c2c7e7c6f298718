package iceberg

import (
	"cmp"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	iceio "github.com/apache/iceberg-go/io"
	// FileIO schemes for the clouds lakegate's object store supports.
	_ "github.com/apache/iceberg-go/io/gocloud/azure"
	_ "github.com/apache/iceberg-go/io/gocloud/gcs"
	_ "github.com/apache/iceberg-go/io/gocloud/s3"
)

// StoreLocation maps an object-store URL, as objstore.Open takes it,
// to the Iceberg location of its key "" (no trailing slash) and the FileIO
// properties that reach it (docs/iceberg.md, "Locations"):
//
//	file:///abs/dir[?prefix=P]           file:///abs/dir/P
//	file://./rel/dir                     file://<absolute path of rel/dir>
//	s3://B?region=R&endpoint=E&use_path_style=true[&anonymous=true][&prefix=P]
//	                                     s3://B/P  {s3.region: R, s3.endpoint: E,
//	                                                s3.force-virtual-addressing: false}
//	                                     (AWS_ACCESS_KEY_ID… → static keys; else
//	                                     anonymous=true → placeholder keys)
//	gs://B[?prefix=P]                    gs://B/P  (STORAGE_EMULATOR_HOST → gcs.endpoint)
//	azblob://C[?prefix=P]                abfs://C@<AZURE_STORAGE_ACCOUNT>.dfs.core.windows.net/P
//	                                     (AZURE_STORAGE_KEY → shared-key auth; an
//	                                     emulator — localemu=true or
//	                                     AZURE_STORAGE_IS_LOCAL_EMULATOR — gets a
//	                                     connection string to DOMAIN/ACCOUNT)
//
// Credentials come from the environment as the object store's own drivers
// take them. A mem:// store (in-process) and unknown schemes are
// ErrUnsupportedStore.
func StoreLocation(storeURL string) (string, map[string]string, error) {
	u, err := url.Parse(storeURL)
	if err != nil {
		return "", nil, fmt.Errorf("%w: store url: %v", ErrInvalid, err)
	}
	q := u.Query()
	prefix := strings.Trim(q.Get("prefix"), "/")
	join := func(base string) string {
		if prefix == "" {
			return base
		}
		return base + "/" + prefix
	}
	props := map[string]string{}
	switch u.Scheme {
	case "file":
		p := u.Path
		if u.Host == "." {
			p = "." + p
		} else if u.Host != "" {
			return "", nil, fmt.Errorf("%w: file store url %q has a host", ErrInvalid, storeURL)
		}
		abs, err := filepath.Abs(filepath.FromSlash(p))
		if err != nil {
			return "", nil, fmt.Errorf("%w: file store %q: %v", ErrInvalid, p, err)
		}
		return join("file://" + strings.TrimSuffix(filepath.ToSlash(abs), "/")), props, nil
	case "s3":
		if u.Host == "" {
			return "", nil, fmt.Errorf("%w: s3 url %q has no bucket", ErrInvalid, storeURL)
		}
		if v := q.Get("region"); v != "" {
			props[iceio.S3Region] = v
		}
		if v := q.Get("endpoint"); v != "" {
			props[iceio.S3EndpointURL] = v
		}
		if v := q.Get("use_path_style"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "", nil, fmt.Errorf("%w: s3 url: use_path_style=%q", ErrInvalid, v)
			}
			props[iceio.S3ForceVirtualAddressing] = strconv.FormatBool(!b)
		}
		anonymous := false
		if v := q.Get("anonymous"); v != "" {
			if anonymous, err = strconv.ParseBool(v); err != nil {
				return "", nil, fmt.Errorf("%w: s3 url: anonymous=%q", ErrInvalid, v)
			}
		}
		switch {
		case os.Getenv("AWS_ACCESS_KEY_ID") != "":
			props[iceio.S3AccessKeyID] = os.Getenv("AWS_ACCESS_KEY_ID")
			props[iceio.S3SecretAccessKey] = os.Getenv("AWS_SECRET_ACCESS_KEY")
			if t := os.Getenv("AWS_SESSION_TOKEN"); t != "" {
				props[iceio.S3SessionToken] = t
			}
		case anonymous:
			// iceberg-go's S3 FileIO cannot send unsigned requests: sign
			// with placeholder keys, which servers without authentication
			// (a test SeaweedFS) accept. Real anonymous S3 buckets do not.
			props[iceio.S3AccessKeyID] = "anonymous"
			props[iceio.S3SecretAccessKey] = "anonymous"
		}
		return join("s3://" + u.Host), props, nil
	case "gs":
		if u.Host == "" {
			return "", nil, fmt.Errorf("%w: gs url %q has no bucket", ErrInvalid, storeURL)
		}
		if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
			if !strings.Contains(h, "://") {
				h = "http://" + h
			}
			props[iceio.GCSEndpoint] = h
			props[iceio.GCSNoAuth] = "true"
		}
		return join("gs://" + u.Host), props, nil
	case "azblob":
		account := os.Getenv("AZURE_STORAGE_ACCOUNT")
		if u.Host == "" || account == "" {
			return "", nil, fmt.Errorf("%w: azblob url %q needs a container and AZURE_STORAGE_ACCOUNT", ErrInvalid, storeURL)
		}
		key := os.Getenv("AZURE_STORAGE_KEY")
		localEmu := q.Get("localemu") == "true" || os.Getenv("AZURE_STORAGE_IS_LOCAL_EMULATOR") == "true"
		switch {
		case localEmu:
			// An emulator (Azurite) serves http://DOMAIN/ACCOUNT, which
			// iceberg-go v0.7.0 builds only from a connection string (its
			// endpoint property yields ACCOUNT.DOMAIN).
			domain, protocol := q.Get("domain"), q.Get("protocol")
			if domain == "" {
				domain = os.Getenv("AZURE_STORAGE_DOMAIN")
			}
			if protocol == "" {
				protocol = cmp.Or(os.Getenv("AZURE_STORAGE_PROTOCOL"), "http")
			}
			if domain == "" || key == "" {
				return "", nil, fmt.Errorf("%w: azblob emulator url %q needs a domain and AZURE_STORAGE_KEY", ErrInvalid, storeURL)
			}
			props[iceio.ADLSConnectionStringPrefix+account] = fmt.Sprintf(
				"DefaultEndpointsProtocol=%s;AccountName=%s;AccountKey=%s;BlobEndpoint=%s://%s/%s;",
				protocol, account, key, protocol, domain, account)
		case key != "":
			props[iceio.ADLSSharedKeyAccountName] = account
			props[iceio.ADLSSharedKeyAccountKey] = key
		}
		return join("abfs://" + u.Host + "@" + account + ".dfs.core.windows.net"), props, nil
	}
	return "", nil, fmt.Errorf("%w: %q", ErrUnsupportedStore, u.Scheme)
}

// ClientProps is the FileIO configuration the REST catalog hands readers
// of tables in the store at storeURL (LoadTableResult "config"): where the
// store is — S3 endpoint, region and path-style addressing in the keys of
// iceberg-go, pyiceberg and Java's S3FileIO; the GCS endpoint — and, only
// when withSecrets, the credentials the node itself uses (s3 keys, Azure
// shared key or connection string). Without secrets readers bring their
// own (docs/iceberg-catalog.md, "Credentials").
func ClientProps(storeURL string, withSecrets bool) (map[string]string, error) {
	_, props, err := StoreLocation(storeURL)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range props {
		secret := k == iceio.S3AccessKeyID || k == iceio.S3SecretAccessKey || k == iceio.S3SessionToken ||
			k == iceio.ADLSSharedKeyAccountKey || strings.HasPrefix(k, iceio.ADLSConnectionStringPrefix)
		if secret && !withSecrets {
			continue
		}
		out[k] = v
	}
	if v, ok := props[iceio.S3Region]; ok {
		out["client.region"] = v // Java
	}
	if v, ok := props[iceio.S3ForceVirtualAddressing]; ok {
		b, _ := strconv.ParseBool(v)
		out["s3.path-style-access"] = strconv.FormatBool(!b) // Java
	}
	return out, nil
}
