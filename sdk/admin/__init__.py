"""Administration over Remoting: MQAdminExt-style calls (``admin_api``) and ``orbitmq admin``."""

from orbitmq.admin.admin_api import AdminError, MQAdminExt

__all__ = ["AdminError", "MQAdminExt"]
