"""`make tune`: the build log's untested ideas as arms, each a whole config booted from scratch."""
