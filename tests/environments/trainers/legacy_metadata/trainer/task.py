import networkdays
import pkg_resources

print("networkdays %s from %s" % (pkg_resources.get_distribution("python-networkdays").version, networkdays.__file__))
