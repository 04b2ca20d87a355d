package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"sigs.k8s.io/yaml"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
)

// listFile is a shard-list file, YAML or JSON (JSON is YAML): the fields of
// redis.ShardedOptions and memcache.ShardedOptions that a file can hold.
// Unknown fields are refused, so a misspelt one is never silently ignored.
type listFile struct {
	Backend   string        `json:"backend"` // "redis" (default) or "memcache"
	Placement placementSpec `json:"placement"`
	Options   sharedSpec    `json:"options"`
	Shards    []shardSpec   `json:"shards"`
}

// placementSpec names a ring preset and its settings (see package ring).
// Each setting is refused on a preset that does not have it.
type placementSpec struct {
	Preset       string `json:"preset"` // jedis (default), twemproxy, libmemcached, spymemcached, go-redis-ring, gomemcache
	Hash         string `json:"hash"`   // a ring.Hash by name: Murmur64A, MD5, FNV1a64Low32, ...
	Replicas     int    `json:"replicas"`
	KeyTags      bool   `json:"key_tags"`
	LegacyNames  bool   `json:"legacy_names"`
	Distribution string `json:"distribution"` // twemproxy: ketama, modula; libmemcached: modula, ketama, ketama-weighted, consistent-weighted, ketama-spy, ketama-spy-weighted
	HashTag      string `json:"hash_tag"`     // twemproxy
	HashAfter    string `json:"hash_after"`   // libmemcached
	Locator      string `json:"locator"`      // spymemcached: array-mod, ketama
	KeyFormat    string `json:"key_format"`   // spymemcached: spymemcached, libmemcached
	Weighted     bool   `json:"weighted"`     // spymemcached
}

// secretSpec says where a password comes from: an environment variable or
// a file (its content, a final newline dropped). Password is there only to
// refuse a password written in the list.
type secretSpec struct {
	Username     string `json:"username"`
	Password     string `json:"password"`
	PasswordEnv  string `json:"password_env"`
	PasswordFile string `json:"password_file"`
}

// sharedSpec holds the options every shard shares.
type sharedSpec struct {
	secretSpec
	DB           int      `json:"db"`
	DialTimeout  duration `json:"dial_timeout"`
	ReadTimeout  duration `json:"read_timeout"`
	WriteTimeout duration `json:"write_timeout"`
	PoolSize     int      `json:"pool_size"`
	Timeout      duration `json:"timeout"`        // memcache
	MaxIdleConns int      `json:"max_idle_conns"` // memcache
}

// shardSpec is one shard.
type shardSpec struct {
	secretSpec
	Name   string `json:"name"`
	Addr   string `json:"addr"`
	DB     *int   `json:"db"`
	Weight int    `json:"weight"`
}

// duration is a time.Duration written as Go writes it ("500ms", "2s").
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"500ms\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("duration %q: want a non-negative Go duration such as \"500ms\"", s)
	}
	*d = duration(v)
	return nil
}

// fleetList is a loaded shard list: the options of one backend's client.
type fleetList struct {
	Path      string
	Backend   string // "redis" or "memcache"
	Placement ring.Preset
	Redis     *shardedredis.ShardedOptions
	Memcache  *shardedmc.ShardedOptions
}

// configError is a bad shard list or argument: exit code 2.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &configError{fmt.Sprintf(format, args...)}
}

// loadList reads and checks the shard list at path.
func loadList(path string) (*fleetList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, configErrorf("shard list: %v", err)
	}
	var f listFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, configErrorf("%s: %v", path, err)
	}
	fl, err := f.build(filepath.Dir(path))
	if err != nil {
		return nil, configErrorf("%s: %v", path, err)
	}
	fl.Path = path
	return fl, nil
}

func (f *listFile) build(dir string) (*fleetList, error) {
	preset, err := f.Placement.preset()
	if err != nil {
		return nil, err
	}
	if len(f.Shards) == 0 {
		return nil, fmt.Errorf("shards: the list has no shard")
	}
	for i, s := range f.Shards {
		if s.Addr == "" {
			return nil, fmt.Errorf("shards[%d].addr: missing", i)
		}
		if strings.Contains(s.Addr, "@") || strings.Contains(s.Addr, "://") {
			return nil, fmt.Errorf("shards[%d].addr: give host:port only (a URL or user information is refused; secrets come from password_env or password_file)", i)
		}
		if s.Weight < 0 {
			return nil, fmt.Errorf("shards[%d].weight: %d is negative", i, s.Weight)
		}
	}
	fl := &fleetList{Placement: preset}
	switch f.Backend {
	case "", "redis":
		fl.Backend = "redis"
		fl.Redis, err = f.redisOptions(dir, preset)
	case "memcache", "memcached":
		fl.Backend = "memcache"
		fl.Memcache, err = f.memcacheOptions(preset)
	default:
		return nil, fmt.Errorf("backend: %q is neither redis nor memcache", f.Backend)
	}
	if err != nil {
		return nil, err
	}
	return fl, nil
}

func (f *listFile) redisOptions(dir string, preset ring.Preset) (*shardedredis.ShardedOptions, error) {
	o := f.Options
	if o.Timeout != 0 || o.MaxIdleConns != 0 {
		return nil, fmt.Errorf("options: timeout and max_idle_conns are memcache options; a redis list has dial_timeout, read_timeout, write_timeout and pool_size")
	}
	pw, err := o.secret("options", dir)
	if err != nil {
		return nil, err
	}
	shared := &goredis.Options{Username: o.Username, Password: pw, DB: o.DB, PoolSize: o.PoolSize,
		DialTimeout: time.Duration(o.DialTimeout), ReadTimeout: time.Duration(o.ReadTimeout), WriteTimeout: time.Duration(o.WriteTimeout)}
	opt := &shardedredis.ShardedOptions{Placement: preset, Options: shared}
	for i, s := range f.Shards {
		pw, err := s.secret(fmt.Sprintf("shards[%d]", i), dir)
		if err != nil {
			return nil, err
		}
		so := &goredis.Options{Username: s.Username, Password: pw}
		if s.DB != nil {
			if *s.DB < 0 {
				return nil, fmt.Errorf("shards[%d].db: %d is negative", i, *s.DB)
			}
			so.DB = *s.DB
		}
		opt.Shards = append(opt.Shards, shardedredis.ShardOptions{Name: s.Name, Weight: s.Weight, Addr: s.Addr, Options: so})
	}
	return opt, nil
}

func (f *listFile) memcacheOptions(preset ring.Preset) (*shardedmc.ShardedOptions, error) {
	o := f.Options
	if o.secretSpec != (secretSpec{}) {
		return nil, fmt.Errorf("options: memcached has no authentication here; remove username and password settings")
	}
	if o.DB != 0 || o.PoolSize != 0 || o.DialTimeout != 0 || o.ReadTimeout != 0 || o.WriteTimeout != 0 {
		return nil, fmt.Errorf("options: db, pool_size, dial_timeout, read_timeout and write_timeout are redis options; a memcache list has timeout and max_idle_conns")
	}
	opt := &shardedmc.ShardedOptions{Placement: preset, Timeout: time.Duration(o.Timeout), MaxIdleConns: o.MaxIdleConns}
	for i, s := range f.Shards {
		if s.DB != nil || s.secretSpec != (secretSpec{}) {
			return nil, fmt.Errorf("shards[%d]: db and passwords are redis settings", i)
		}
		opt.Shards = append(opt.Shards, shardedmc.ShardOptions{Name: s.Name, Weight: s.Weight, Addr: s.Addr})
	}
	return opt, nil
}

// secret returns the password s names, refusing one written inline.
// field names s in errors; no error holds the password.
func (s secretSpec) secret(field, dir string) (string, error) {
	switch {
	case s.Password != "":
		return "", fmt.Errorf("%s.password: a password written in the list is refused; name an environment variable (password_env) or a file (password_file)", field)
	case s.PasswordEnv != "" && s.PasswordFile != "":
		return "", fmt.Errorf("%s: password_env and password_file are exclusive", field)
	case s.PasswordEnv != "":
		pw, ok := os.LookupEnv(s.PasswordEnv)
		if !ok {
			return "", fmt.Errorf("%s.password_env: the environment variable %s is not set", field, s.PasswordEnv)
		}
		return pw, nil
	case s.PasswordFile != "":
		path := s.PasswordFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("%s.password_file: %v", field, err)
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
	}
	return "", nil
}

// hashes lists the ring's hashes by the names Hash.String gives them.
var hashes = []ring.Hash{ring.HashMurmur64A, ring.HashMD5, ring.HashFNV1a64Low32, ring.HashFNV164Low32,
	ring.HashFNV1a32, ring.HashFNV132, ring.HashOneAtATime, ring.HashCRC16Twemproxy, ring.HashCRC32Bits16to30,
	ring.HashCRC32, ring.HashCRC32First256, ring.HashMurmur2, ring.HashMurmur3, ring.HashLookup3,
	ring.HashHsiehTwemproxy, ring.HashXXHash64, ring.HashJavaStringHashCode}

// hashByName returns the Hash named name (case-insensitive), the zero Hash
// (the preset's default) for "".
func hashByName(field, name string) (ring.Hash, error) {
	if name == "" {
		return ring.Hash{}, nil
	}
	names := make([]string, len(hashes))
	for i, h := range hashes {
		if strings.EqualFold(h.String(), name) {
			return h, nil
		}
		names[i] = h.String()
	}
	return ring.Hash{}, fmt.Errorf("placement.%s: unknown hash %q (one of %s)", field, name, strings.Join(names, ", "))
}

// choice returns the index of name in names ("" is index 0, the default).
func choice(field, name string, names ...string) (int, error) {
	if name == "" {
		return 0, nil
	}
	if i := slices.Index(names, strings.ToLower(name)); i >= 0 {
		return i, nil
	}
	return 0, fmt.Errorf("placement.%s: unknown value %q (one of %s)", field, name, strings.Join(names, ", "))
}

// preset builds the ring preset p names. A setting the preset lacks is an
// error naming it; ring.New refuses settings the configuration does not use.
func (p placementSpec) preset() (ring.Preset, error) {
	hash, err := hashByName("hash", p.Hash)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{"hash": p.Hash != "", "replicas": p.Replicas != 0, "key_tags": p.KeyTags,
		"legacy_names": p.LegacyNames, "distribution": p.Distribution != "", "hash_tag": p.HashTag != "",
		"hash_after": p.HashAfter != "", "locator": p.Locator != "", "key_format": p.KeyFormat != "", "weighted": p.Weighted}
	only := func(preset string, allowed ...string) error {
		for _, k := range slices.Sorted(maps.Keys(set)) {
			if set[k] && !slices.Contains(allowed, k) {
				return fmt.Errorf("placement.%s: the %s preset has no such setting (it has: %s)", k, preset, strings.Join(allowed, ", "))
			}
		}
		return nil
	}
	switch strings.ToLower(p.Preset) {
	case "", "jedis":
		return ring.Jedis{Hash: hash, Replicas: p.Replicas, KeyTags: p.KeyTags, LegacyNames: p.LegacyNames},
			only("jedis", "hash", "replicas", "key_tags", "legacy_names")
	case "twemproxy":
		d, err := choice("distribution", p.Distribution, "ketama", "modula")
		if err != nil {
			return nil, err
		}
		if p.HashTag != "" && len(p.HashTag) != 2 {
			return nil, fmt.Errorf("placement.hash_tag: %q is not two characters such as \"{}\"", p.HashTag)
		}
		return ring.Twemproxy{Distribution: ring.TwemproxyDistribution(d), Hash: hash, HashTag: p.HashTag},
			only("twemproxy", "distribution", "hash", "hash_tag")
	case "libmemcached":
		d, err := choice("distribution", p.Distribution, "modula", "ketama", "ketama-weighted", "consistent-weighted", "ketama-spy", "ketama-spy-weighted")
		if err != nil {
			return nil, err
		}
		after, err := hashByName("hash_after", p.HashAfter)
		if err != nil {
			return nil, err
		}
		return ring.Libmemcached{Distribution: ring.LibmemcachedDistribution(d), Hash: hash, HashAfter: after},
			only("libmemcached", "distribution", "hash", "hash_after")
	case "spymemcached":
		l, err := choice("locator", p.Locator, "array-mod", "ketama")
		if err != nil {
			return nil, err
		}
		kf, err := choice("key_format", p.KeyFormat, "spymemcached", "libmemcached")
		if err != nil {
			return nil, err
		}
		return ring.Spymemcached{Locator: ring.SpymemcachedLocator(l), KeyFormat: ring.SpymemcachedKeyFormat(kf), Weighted: p.Weighted},
			only("spymemcached", "locator", "key_format", "weighted")
	case "go-redis-ring":
		return ring.GoRedisRing{}, only("go-redis-ring")
	case "gomemcache":
		return ring.Gomemcache{}, only("gomemcache")
	}
	return nil, fmt.Errorf("placement.preset: unknown preset %q (one of jedis, twemproxy, libmemcached, spymemcached, go-redis-ring, gomemcache)", p.Preset)
}
