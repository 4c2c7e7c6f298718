package objstore

// NamedTempOnly makes a file:// store s create objects through named
// temporary files, the path taken where createAnon is not available, so
// that the tests cover both.
func NamedTempOnly(s Store) {
	s.(*blobStore).file.noAnon.Store(true)
}
