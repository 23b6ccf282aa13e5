package postgres

// Q exposes the schema templating to the tests, which write rows by hand.
func (b *Backend) Q(sql string) string { return b.q(sql) }
