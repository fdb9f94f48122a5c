package redisstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDialectOf(t *testing.T) {
	cases := map[string]dialect{
		"6.2.14":    {},
		"6.0.0":     {},
		"7.0.0":     {setGetNX: true},
		"7.0.15":    {setGetNX: true},
		"7.2.4":     {setGetNX: true}, // also what Valkey reports as redis_version
		"8.2.1":     {setGetNX: true},
		"8.4.0":     {setGetNX: true, ifEq: true},
		"9.0.0":     {setGetNX: true, ifEq: true},
		"10.1.0":    {setGetNX: true, ifEq: true},
		"":          {},
		"7":         {},
		"seven.0.0": {},
		"7.x":       {},
	}
	for version, want := range cases {
		require.Equal(t, want, dialectOf(version), "%q", version)
	}
}

func TestDialectAnd(t *testing.T) {
	all := dialect{setGetNX: true, ifEq: true}
	require.Equal(t, dialect{setGetNX: true}, all.and(dialectOf("7.0.15")), "a cluster runs what all its masters run")
	require.Equal(t, dialect{}, dialectOf("8.4.0").and(dialectOf("6.2.0")))
}

func TestInfoField(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n"
	require.Equal(t, "7.0.15", infoField(info, "redis_version"))
	require.Empty(t, infoField(info, "valkey_version"))
}
