package redissync

// RedisForExamples returns the address of the redis-server that the
// examples use: the one the package's tests share, started on first use
// and stopped by TestMain. A service has its own, such as
// "127.0.0.1:6379". It panics when the server cannot be started (is the
// Debian package redis-server installed?).
func RedisForExamples() string {
	addr, err := startSharedRedis()
	if err != nil {
		panic(err)
	}
	return addr
}
