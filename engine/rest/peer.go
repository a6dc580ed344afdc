package rest

import (
	"net"
	"strconv"
)

// peerOf names who is at the other end of a connection, for the gate's
// quotas: on this machine (whatever address it connected through), the
// user that owns the client's socket ("uid 1000"), so that another local
// user's connections never take the job user's place; from elsewhere, or
// where the owner cannot be found, the client's IP address.
func peerOf(c net.Conn) string {
	remote, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return c.RemoteAddr().String()
	}
	if local, ok := c.LocalAddr().(*net.TCPAddr); ok {
		// Only a client on this machine has its socket in this kernel.
		if uid, ok := socketOwner(remote, local); ok {
			return "uid " + strconv.FormatUint(uint64(uid), 10)
		}
	}
	return "ip " + remote.IP.String()
}
