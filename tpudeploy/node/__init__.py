"""Code that runs on the serving machines themselves (the TPU VM's host, the GKE pod), shipped
as source: standard library only, no tpudeploy import, Python 3.8 or later."""
