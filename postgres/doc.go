// Package postgres is the onetick backend on PostgreSQL (pgx v5).
package postgres
