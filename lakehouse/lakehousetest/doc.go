// Package lakehousetest holds what the tests of the table packages
// (lakehouse, tables) share: the nested Avro definitions their nested
// typed-column tests use, and ArrowValue, which turns a row of an Arrow
// column into plain Go values to compare with what was produced.
package lakehousetest
